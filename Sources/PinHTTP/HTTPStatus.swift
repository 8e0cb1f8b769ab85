/// Reason phrases for the status codes a proxy writes or relays from
/// HTTP/2, which carries none (RFC 9113 §8.3.2). A code not listed gets
/// "Status": RFC 9112 §4 lets clients ignore the phrase.
public enum HTTPStatus {
  public static func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 100: "Continue"
    case 200: "OK"
    case 201: "Created"
    case 202: "Accepted"
    case 204: "No Content"
    case 206: "Partial Content"
    case 301: "Moved Permanently"
    case 302: "Found"
    case 303: "See Other"
    case 304: "Not Modified"
    case 307: "Temporary Redirect"
    case 308: "Permanent Redirect"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 407: "Proxy Authentication Required"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 410: "Gone"
    case 413: "Content Too Large"
    case 414: "URI Too Long"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    case 505: "HTTP Version Not Supported"
    default: "Status"
    }
  }
}
