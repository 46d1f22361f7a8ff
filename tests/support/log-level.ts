/**
 * Runs before every test file of both projects (vitest.config.ts setupFiles): the log level from the LOG_LEVEL
 * setting, as a host applies it (shared/log.ts). vitest.config.ts sets LOG_LEVEL to warn, so a passing run prints
 * warnings and errors only; `LOG_LEVEL=debug npx vitest run …` shows everything.
 */
import { buildConfig } from "../../shared/config";
import { setLogLevel } from "../../shared/log";

setLogLevel(buildConfig({ LOG_LEVEL: process.env.LOG_LEVEL }).logLevel);
