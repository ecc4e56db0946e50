# nginx beside hcctld on the same bytes (sourced by bench/api-list.sh and bench/scale.sh): one
# nginx worker (hcctld answers its API on one thread), TLS 1.3 with hcctld's own P-256
# certificate and key, keep-alive; and wrk with the same header, connections and duration
# against both. The caller kills $nginx_pid.

# nginx_serve DIR BODY CERT KEY PORT: nginx serving BODY at https://127.0.0.1:PORT/v1/nodes,
# checked byte for byte; sets nginx_pid.
nginx_serve() {
    local dir=$1 body=$2 cert=$3 key=$4 port=$5
    mkdir -p "$dir/nginx/v1" "$dir/nginx/tmp"
    cp "$body" "$dir/nginx/v1/nodes"
    cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/nginx.err warn;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    client_body_temp_path $dir/nginx/tmp;
    proxy_temp_path $dir/nginx/tmp;
    fastcgi_temp_path $dir/nginx/tmp;
    uwsgi_temp_path $dir/nginx/tmp;
    scgi_temp_path $dir/nginx/tmp;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_protocols TLSv1.3;
        ssl_certificate $cert;
        ssl_certificate_key $key;
        root $dir/nginx;
        location / { default_type application/json; }
    }
}
CONF
    # nginx's worker runs as another user when started by root: it must read the file (else it
    # answers a fast 403, which once looked like 10,000 req/s)
    chmod go+rx "$dir" "$dir/nginx" "$dir/nginx/v1" && chmod go+r "$dir/nginx/v1/nodes"
    /usr/sbin/nginx -p "$dir" -c "$dir/nginx.conf" &
    nginx_pid=$!
    for _ in $(seq 50); do curl -skf "https://127.0.0.1:$port/v1/nodes" -o /dev/null && break; sleep 0.1; done
    cmp -s "$body" <(curl -sk "https://127.0.0.1:$port/v1/nodes") ||
        { echo "bench: nginx serves other bytes" >&2; return 1; }
}

# wrk_rps URL TOKEN CONNS THREADS DURATION: requests/s, refused unless every answer was 2xx
wrk_rps() {
    local out
    out=$(wrk -t"$4" -c"$3" -d"$5" -H "Authorization: Bearer $2" "$1")
    if grep -q "Non-2xx" <<<"$out"; then
        echo "bench: $1 answered errors: $(grep Non-2xx <<<"$out")" >&2
        return 1
    fi
    awk '/^Requests\/sec:/ { print $2 }' <<<"$out"
}
