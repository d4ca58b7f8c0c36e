#!/bin/sh
# A MySQL-compatible image made from the host's MariaDB packages (no registry is reachable
# here), behaving as the official MySQL image does for what Capstan uses: MYSQL_ROOT_PASSWORD
# and the SQL files of /docker-entrypoint-initdb.d initialise an empty /var/lib/mysql; the
# server runs as uid 999 and listens on 3306; mysql, mysqladmin and mysqldump are on the path.
# Usage: mysql.sh WORKDIR TAG
set -eu
R="$1/rootfs"; TAG="$2"
rm -rf "$R"; mkdir -p "$R/bin" "$R/usr/bin" "$R/usr/sbin" "$R/usr/share" "$R/tmp" "$R/etc/mysql" \
  "$R/var/lib/mysql" "$R/usr/local/bin" "$R/docker-entrypoint-initdb.d"
for b in mariadb mariadb-admin mariadb-dump my_print_defaults mariadb-install-db; do
  cp -L "/usr/bin/$b" "$R/usr/bin/"
done
ln -s mariadb "$R/usr/bin/mysql"; ln -s mariadb-admin "$R/usr/bin/mysqladmin"
ln -s mariadb-dump "$R/usr/bin/mysqldump"
cp -L /usr/sbin/mariadbd "$R/usr/sbin/"; ln -s mariadbd "$R/usr/sbin/mysqld"
cp -a /usr/share/mysql "$R/usr/share/"
for f in "$R"/usr/bin/* "$R"/usr/sbin/mariadbd; do
  ldd "$f" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$R$(dirname "$lib")"; cp -nL "$lib" "$R$lib"
  done
done
cp /bin/busybox "$R/bin/busybox"
for t in sh cat echo ls rm mkdir sed seq sleep kill env hostname dirname basename chmod chown; do
  ln -sf busybox "$R/bin/$t"
done
printf 'root:x:0:0::/root:/bin/sh\nmysql:x:999:999::/var/lib/mysql:/bin/sh\n' > "$R/etc/passwd"
printf 'root:x:0:\nmysql:x:999:\n' > "$R/etc/group"
printf '[mysqld]\ndatadir=/var/lib/mysql\nbind-address=0.0.0.0\nport=3306\nskip-name-resolve\n[client-server]\nsocket=/tmp/mysqld.sock\n' \
  > "$R/etc/mysql/my.cnf"
cat > "$R/usr/local/bin/docker-entrypoint.sh" <<'SH'
#!/bin/sh
set -e
if [ ! -d /var/lib/mysql/mysql ]; then
  mariadb-install-db --datadir=/var/lib/mysql --auth-root-authentication-method=normal --force \
    --skip-test-db --skip-name-resolve >/dev/null
  mariadbd --skip-networking --socket=/tmp/init.sock &
  pid=$!
  for _ in $(seq 60); do mariadb-admin --socket=/tmp/init.sock -uroot ping >/dev/null 2>&1 && break; sleep 1; done
  {
    for f in /docker-entrypoint-initdb.d/*.sql; do [ -f "$f" ] && cat "$f"; done
    printf "ALTER USER 'root'@'localhost' IDENTIFIED BY '%s';\n" "$MYSQL_ROOT_PASSWORD"
  } | mariadb --socket=/tmp/init.sock -uroot
  kill "$pid"; wait "$pid" || true
  echo "database initialised"
fi
exec "$@"
SH
chmod 755 "$R/usr/local/bin/docker-entrypoint.sh"
chown -R 999:999 "$R/var/lib/mysql"; chmod 1777 "$R/tmp"
tar -C "$R" -c . | docker import \
  --change "USER 999" \
  --change "ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/bin" \
  --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
  --change 'CMD ["mysqld"]' - "$TAG"
