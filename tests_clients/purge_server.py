"""An HTTP server standing in for a frontend cache: it records each PURGE."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class PurgeServer(ThreadingHTTPServer):
    """Answers PURGE with 200 and keeps (host, path) of every request."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _PurgeHandler)
        self.purged = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def start(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self):
        self.shutdown()
        self.server_close()


class _PurgeHandler(BaseHTTPRequestHandler):
    def do_PURGE(self):
        self.server.purged.append((self.headers["Host"], self.path))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format, *args):
        """Keep the lane's output to pytest's."""
