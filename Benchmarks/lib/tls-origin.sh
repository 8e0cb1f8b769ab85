# Sourced by the benchmark scripts: installs nginx and wrk when missing, and
# writes the TLS origin they all measure against (keep-alive, a 100-byte body
# at /small, the httpbin.org test leaf and its intermediate).
# Usage: tls_origin WORKDIR PORT   (sets $pki; writes WORKDIR/nginx.conf)
for tool in nginx wrk; do
  command -v "$tool" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light wrk; }
done
pki=$PWD/Tests/Fixtures/pki

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
