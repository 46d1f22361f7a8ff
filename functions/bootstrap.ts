/**
 * Cold-start setup shared by every Lambda entry point: settings from the environment, with the SST-linked
 * resources filled in (infra/: each function links only what it uses). Runs once per Lambda instance.
 */
import { Resource } from "sst";
import { buildConfig } from "../shared/config";
import { createRuntime, setRuntime } from "../shared/runtime";
import { setAnswerEnvelope } from "../shared/http/answer-bytes";

const linked = Resource as unknown as { Table: { name: string }; JwtSigningKey: { value: string }; Chains: { value: string } };

setRuntime(
  createRuntime({
    config: buildConfig({
      ...process.env,
      TABLE_NAME: linked.Table.name,
      // Sign-in links the private key; every other HTTP function verifies tokens with the public half
      // (JWT_PUBLIC_KEY, infra/secrets.ts), which shared/http/token.ts accepts in the same setting.
      JWT_SIGNING_KEY: "JwtSigningKey" in Resource ? linked.JwtSigningKey.value : process.env.JWT_PUBLIC_KEY,
      // A secret linked into the bundle (encrypted), never a plaintext variable.
      ...("Chains" in Resource ? { CHAINS: linked.Chains.value } : {}),
    }),
  }),
);

// Answers go out inside the invocation's response envelope, which escapes the body again (page and record budgets).
setAnswerEnvelope("lambda");
