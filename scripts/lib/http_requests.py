#!/usr/bin/env python3
"""Send exactly N keep-alive GET requests to HOST:PORT over CONNS connections, one at a
time per connection, as wrk does, and print how many answers of each status came back.

A fixed count, not a duration: under valgrind (scripts/bench-gate.sh's instruction-count
column) the instructions a gate spends are divided by the requests it answered, so the
count must not depend on how fast anything ran. A connection the server closes is opened
again.

usage: http_requests.py HOST PORT CONNS N
"""
import selectors
import socket
import sys


def main():
    host, port, conns, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    request = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    sel = selectors.DefaultSelector()
    statuses = {}
    sent = 0
    done = 0

    def open_one():
        nonlocal sent
        s = socket.create_connection((host, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(request)
        sent += 1
        sel.register(s, selectors.EVENT_READ, [bytearray(), True])

    for _ in range(min(conns, total)):
        open_one()
    while done < total:
        for key, _ in sel.select():
            s, (buf, _) = key.fileobj, key.data
            chunk = s.recv(65536)
            buf.extend(chunk)
            closed = not chunk
            while True:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = bytes(buf[:end]).decode("latin-1").split("\r\n")
                length = 0
                close = False
                for line in head[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                    if name.strip().lower() == "connection" and "close" in value.lower():
                        close = True
                if len(buf) < end + 4 + length:
                    break
                del buf[: end + 4 + length]
                status = head[0].split(" ")[1]
                statuses[status] = statuses.get(status, 0) + 1
                done += 1
                key.data[1] = False
                if close:
                    closed = True
                    break
                if sent < total:
                    s.sendall(request)
                    sent += 1
                    key.data[1] = True
            if closed:
                if key.data[1]:
                    sent -= 1  # closed without answering: send it again elsewhere
                sel.unregister(s)
                s.close()
                if sent < total:
                    open_one()
    print(" ".join(f"{k}:{v}" for k, v in sorted(statuses.items())))


if __name__ == "__main__":
    main()
