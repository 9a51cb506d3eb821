#!/usr/bin/env python3
"""A stand-in for redis-server on machines that lack it (the GPU machine), for scripts/gpu/remote-cache.sh.

Speaks RESP over TCP with the commands gemmtune's remote cache sends (SELECT, GETRANGE, SET) and
those a test needs to look or plant (PING, GET, DEL, KEYS with a trailing-* prefix pattern,
DBSIZE), one dict per database, in memory. Host tests use Debian's real redis-server instead.

  mini_redis.py serve PORTFILE        # listens on a free loopback port, writes it to PORTFILE
  mini_redis.py call PORT CMD ARG...  # one command, prints the reply (strings raw, lists one per line)
"""
import socket
import socketserver
import sys
import threading

DBS = {}
LOCK = threading.Lock()


def encode(v):
    if v is None:
        return b"$-1\r\n"
    if isinstance(v, int):
        return b":%d\r\n" % v
    if isinstance(v, list):
        return b"*%d\r\n" % len(v) + b"".join(encode(x) for x in v)
    if isinstance(v, Exception):
        return b"-ERR %s\r\n" % str(v).encode()
    if isinstance(v, str):
        return b"+%s\r\n" % v.encode()
    return b"$%d\r\n%s\r\n" % (len(v), v)


class Handler(socketserver.StreamRequestHandler):
    def read_command(self):
        line = self.rfile.readline()
        if not line:
            return None
        if not line.startswith(b"*"):
            raise ValueError("expected an array")
        args = []
        for _ in range(int(line[1:])):
            n = int(self.rfile.readline()[1:])
            args.append(self.rfile.read(n + 2)[:-2])
        return args

    def handle(self):
        db = 0
        while True:
            try:
                args = self.read_command()
            except (ValueError, OSError):
                return
            if args is None:
                return
            cmd = args[0].upper()
            with LOCK:
                d = DBS.setdefault(db, {})
                if cmd == b"PING":
                    r = "PONG"
                elif cmd == b"SELECT":
                    db, r = int(args[1]), "OK"
                elif cmd == b"SET":
                    d[args[1]], r = args[2], "OK"
                elif cmd == b"GET":
                    r = d.get(args[1])
                elif cmd == b"GETRANGE":  # inclusive end, as Redis; "" for a missing key
                    v, lo, hi = d.get(args[1], b""), int(args[2]), int(args[3])
                    r = v[lo:hi + 1]
                elif cmd == b"DEL":
                    r = sum(1 for k in args[1:] if d.pop(k, None) is not None)
                elif cmd == b"KEYS":
                    prefix = args[1].rstrip(b"*")
                    r = sorted(k for k in d if k.startswith(prefix))
                elif cmd == b"DBSIZE":
                    r = len(d)
                else:
                    r = Exception("unknown command " + cmd.decode(errors="replace"))
            self.wfile.write(encode(r))


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def call(port, args):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        f = s.makefile("rb")

        def reply():
            line = f.readline()
            kind, rest = line[:1], line[1:-2]
            if kind in (b"+", b"-", b":"):
                return rest
            if kind == b"$":
                return None if int(rest) < 0 else f.read(int(rest) + 2)[:-2]
            return [reply() for _ in range(int(rest))]

        return reply()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        server = Server(("127.0.0.1", 0), Handler)
        with open(sys.argv[2], "w") as f:
            f.write(str(server.server_address[1]))
        server.serve_forever()
    else:
        out = call(int(sys.argv[2]), [a.encode() for a in sys.argv[3:]])
        for item in out if isinstance(out, list) else [out]:
            sys.stdout.buffer.write((item or b"") + b"\n")
