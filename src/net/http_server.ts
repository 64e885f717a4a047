// The HTTP server every server of the project (`serve`, the environments, the
// retriever) is built on: node:http, which Bun, Deno and Node all offer. Network I/O
// stays at this edge, as file I/O stays in storage/, so that the layers the trainer
// stands on import nothing of a platform and a browser build never meets it.

export { createServer, STATUS_CODES } from 'node:http';
export type { IncomingMessage, Server, ServerResponse } from 'node:http';
