#!/bin/sh
# A PostgreSQL image made from the host's Debian packages (no registry is reachable here),
# behaving as the official image does for what Capstan uses: POSTGRES_USER, POSTGRES_PASSWORD
# and POSTGRES_DB initialise an empty data directory at /var/lib/postgresql/data; the server
# runs as uid 999 and listens on 5432; psql, pg_dump and pg_isready are on the path.
# Usage: postgres.sh WORKDIR VERSION TAG
set -eu
R="$1/rootfs"; V="$2"; TAG="$3"
rm -rf "$R"; mkdir -p "$R/bin" "$R/usr/lib/postgresql" "$R/usr/share/postgresql" "$R/tmp" "$R/var/run/postgresql" "$R/var/lib/postgresql/data" "$R/etc" "$R/usr/local/bin" "$R/usr/share"
cp -a /usr/lib/postgresql/$V "$R/usr/lib/postgresql/"
rm -f "$R/usr/lib/postgresql/$V/lib/llvmjit"*
rm -rf "$R/usr/lib/postgresql/$V/lib/bitcode"
cp -a /usr/share/postgresql/$V "$R/usr/share/postgresql/"
mkdir -p "$R/usr/share/zoneinfo"; cp -aL /usr/share/zoneinfo/UTC /usr/share/zoneinfo/Etc "$R/usr/share/zoneinfo/" 2>/dev/null || true
for f in "$R"/usr/lib/postgresql/$V/bin/* "$R"/usr/lib/postgresql/$V/lib/*.so; do
  ldd "$f" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$R$(dirname "$lib")"; cp -nL "$lib" "$R$lib"
  done
done
cp /bin/busybox "$R/bin/busybox"
for t in sh cat echo mkdir sleep env rm ls chmod id sed grep; do ln -sf busybox "$R/bin/$t"; done
printf 'root:x:0:0::/root:/bin/sh\npostgres:x:999:999::/var/lib/postgresql:/bin/sh\n' > "$R/etc/passwd"
printf 'root:x:0:\npostgres:x:999:\n' > "$R/etc/group"
cat > "$R/usr/local/bin/docker-entrypoint.sh" <<'SH'
#!/bin/sh
set -e
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pwfile
  initdb -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --pwfile=/tmp/pwfile --auth=scram-sha-256 --locale=C -E UTF8 >/dev/null
  rm -f /tmp/pwfile
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  echo "jit = off" >> "$PGDATA/postgresql.conf"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "database initialised"
fi
exec "$@" -D "$PGDATA"
SH
chmod 755 "$R/usr/local/bin/docker-entrypoint.sh"
chown -R 999:999 "$R/var/run/postgresql" "$R/var/lib/postgresql"
chmod 700 "$R/var/lib/postgresql/data"; chmod 1777 "$R/tmp"
tar -C "$R" -c . | docker import \
  --change "USER 999" \
  --change "ENV PATH=/usr/lib/postgresql/$V/bin:/usr/local/bin:/bin" \
  --change "ENV TZ=UTC" \
  --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
  --change 'CMD ["postgres"]' - "$TAG"
