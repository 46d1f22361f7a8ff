/**
 * Cold-start setup shared by every Lambda entry point: settings from the environment, with the
 * SST-linked resources (table name, signing key) filled in. Runs once per Lambda instance.
 */
import { Resource } from "sst";
import { buildConfig } from "../shared/config";
import { createRuntime, setRuntime } from "../shared/runtime";

const linked = Resource as unknown as { Table: { name: string }; JwtSigningKey: { value: string } };

setRuntime(
  createRuntime({
    config: buildConfig({ ...process.env, TABLE_NAME: linked.Table.name, JWT_SIGNING_KEY: linked.JwtSigningKey.value }),
  }),
);
