/**
 * Runs before every test file (vitest.config.ts setupFiles): the local host's ports as \`npm start\` installs them
 * (shared/service/wire-local.ts: the in-process bus with the runner, the local scheduler, not started), for tests
 * that call domain modules without a host of their own. A test that needs its own bus or scheduler installs it.
 */
import { wireLocal } from "../../shared/service/wire-local";

wireLocal();
