/** globalSetup of the `chains` project (vitest.config.ts): the suite's stack with chains 31337 and 11155111. */
import type { TestProject } from "vitest/node";
import { setupStack } from "./global-setup";

export default (project: TestProject) => setupStack(project, [31337, 11155111]);
