# Sourced by the benchmark scripts: installs nginx and wrk when missing, and
# writes the TLS origin they all measure against (keep-alive, a 100-byte body
# at /small, the httpbin.org test leaf and its intermediate).
# Usage: tls_origin WORKDIR PORT   (sets $pki; writes WORKDIR/nginx.conf)
#        proxy_config WORKDIR LISTEN_PORT ORIGIN_PORT [LISTENER_LINE] [TOP_LINE]
#          (writes WORKDIR/proxy.yaml and WORKDIR/absolute.lua)
for tool in nginx wrk; do
  command -v "$tool" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light wrk; }
done
pki=$PWD/Tests/Fixtures/pki

# wrk with its output on stdout, failing the benchmark on any answer that is
# not 2xx/3xx or any socket error: a figure measured over refusals (a 503
# past a connection limit, say) is not the cost of a request.
wrk_checked() {
  local out
  out=$(wrk "$@") || { echo "wrk failed: $out" >&2; exit 1; }
  if echo "$out" | grep -qE "Non-2xx or 3xx responses|Socket errors"; then
    echo "benchmark invalid: wrk saw failed requests:" >&2
    echo "$out" | grep -E "Non-2xx or 3xx responses|Socket errors" >&2
    exit 1
  fi
  echo "$out"
}

tls_origin() {
  local work=$1 port=$2
  cat "$pki/httpbin.pem" "$pki/int-a.pem" > "$work/chain.pem"
  cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port ssl;
    ssl_certificate $work/chain.pem;
    ssl_certificate_key $pki/httpbin.key;
    location /small { return 200 "$(printf '%0100d' 0)"; }
  }
}
CONF
}

# The pinproxy side of every benchmark: a forward listener, httpbin.org
# mapped to the origin, a publicKey pin on the test intermediate, access log
# off; plus the wrk script for absolute-form GETs of /small.
proxy_config() {
  local work=$1 listen=$2 origin=$3 listener=${4:-} top=${5:-}
  cat > "$work/proxy.yaml" <<CONF
$top
listeners:
  - {name: forward, address: "127.0.0.1:$listen", mode: forward}
$listener
connectTo: ["httpbin.org:443:127.0.0.1:$origin"]
anchorSets:
  test: {files: [$pki/root-a.pem]}
defaults: {action: deny}
limits: {maxIdlePerUpstream: 64}
logging: {access: false}
domains:
  - {domain: httpbin.org, anchors: [test], pinningMode: publicKey, pinnedCertificates: [$pki/int-a.pem]}
CONF
  printf 'wrk.path = "http://httpbin.org/small"\nwrk.headers["Host"] = "httpbin.org"\n' > "$work/absolute.lua"
}
