"""The API's listening socket (``deployments/embedded.bind_socket``): accepted connections must
get ``TCP_NODELAY``, or every keep-alive API call waits ≈40 ms (Nagle against delayed ACK;
measured 48 ms per call with a protocol-0 socket, 3 ms with this one)."""

from __future__ import annotations

import asyncio
import socket

from tianshu_mcp.hosting.embedded import bind_socket


def test_accepted_connections_get_tcp_nodelay() -> None:
    listener = bind_socket(0)
    assert listener.proto == socket.IPPROTO_TCP
    port = listener.getsockname()[1]
    seen: list[int] = []

    async def main() -> None:
        def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_conn, sock=listener)  # how uvicorn serves it
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(200):
                if seen:
                    break
                await asyncio.sleep(0.05)
            writer.close()

    asyncio.run(main())
    assert seen and seen[0] != 0
