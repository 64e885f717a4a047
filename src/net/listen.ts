// Starting the project's node:http servers: listen, and the URL clients use.

import type { AddressInfo } from 'node:net';
import type { Server } from './http_server.ts';

/** Listens on host:port (0 picks a free port); resolves with the bound port and `http://host:port`. */
export function listen(server: Server, port: number, host: string): Promise<{ port: number; origin: string }> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const bound = (server.address() as AddressInfo).port;
      resolve({ port: bound, origin: `http://${host.includes(':') ? `[${host}]` : host}:${bound}` });
    });
  });
}
