// Stand-ins for AgentGym's environment servers, by the name AgentGym gives the
// environment (an environment plugin's agentgym.name): `env serve <name> --agentgym`
// and the tests run them where AgentGym's own cannot be installed.

import type { FastApiHandle } from './fastapi.ts';
import { serveAlfworld } from './alfworld_server.ts';
import { serveWebshop } from './webshop_server.ts';

export { processOb, serveAlfworld, ALFWORLD_TEST_GAMES, ALFWORLD_TRAIN_GAMES, type AlfworldServerHandle, type AlfworldServerOptions } from './alfworld_server.ts';
export { serveWebshop, WEBSHOP_GOALS, type WebshopServerHandle, type WebshopServerOptions } from './webshop_server.ts';
export { pythonIndex, type FastApiHandle } from './fastapi.ts';

export interface StandInHandle extends FastApiHandle {
  environments(): number;
}

export const AGENTGYM_STAND_INS: Readonly<Record<string, (options: { host?: string; port?: number }) => Promise<StandInHandle>>> = {
  alfworld: serveAlfworld,
  webshop: serveWebshop,
};
