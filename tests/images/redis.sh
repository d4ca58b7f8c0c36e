#!/bin/sh
# A Redis image made from the host's Debian packages (no registry is reachable here), behaving
# as the official image does for what Capstan uses: the command is run as given (redis-server
# and its arguments), the server runs as uid 999 in /data, redis-cli is on the path.
# Usage: redis.sh WORKDIR TAG
set -eu
R="$1/rootfs"; TAG="$2"
rm -rf "$R"; mkdir -p "$R/bin" "$R/usr/bin" "$R/data" "$R/tmp" "$R/etc" "$R/usr/local/bin"
cp -L /usr/bin/redis-server /usr/bin/redis-cli "$R/usr/bin/"
for f in "$R"/usr/bin/*; do
  ldd "$f" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$R$(dirname "$lib")"; cp -nL "$lib" "$R$lib"
  done
done
cp /bin/busybox "$R/bin/busybox"
for t in sh cat echo ls rm mv sed env sleep; do ln -sf busybox "$R/bin/$t"; done
printf 'root:x:0:0::/root:/bin/sh\nredis:x:999:999::/data:/bin/sh\n' > "$R/etc/passwd"
printf 'root:x:0:\nredis:x:999:\n' > "$R/etc/group"
printf '#!/bin/sh\nset -e\nexec "$@"\n' > "$R/usr/local/bin/docker-entrypoint.sh"
chmod 755 "$R/usr/local/bin/docker-entrypoint.sh"
chown -R 999:999 "$R/data"; chmod 1777 "$R/tmp"
tar -C "$R" -c . | docker import \
  --change "USER 999" \
  --change "WORKDIR /data" \
  --change "ENV PATH=/usr/local/bin:/usr/bin:/bin" \
  --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
  --change 'CMD ["redis-server"]' - "$TAG"
