/**
 * Lambda's Invoke API for the Lambda harness: a loopback server that answers
 * `POST /2015-03-31/functions/{name}/invocations` (what shared/sandbox/lambda-invoke.ts sends once
 * AWS_ENDPOINT_URL_LAMBDA points here) by invoking a bundled function in a LambdaHost. As Lambda does, it runs
 * one invocation per instance and starts another instance (a cold start) when every instance is busy.
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { LambdaHost } from "./lambda-host";

export interface LambdaInvokeStub {
  url: string;
  /** Every instance started so far (the first is started before the stub answers). */
  instances: LambdaHost[];
  /** The authorization header of each call (signed with Signature Version 4). */
  authorizations: string[];
  close(): Promise<void>;
}

const read = async (req: IncomingMessage) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
};

/** Serves invocations of `functions/<name>.ts`, each instance started with `env` alone. */
export async function startLambdaInvokeStub(name: string, env: Record<string, string>): Promise<LambdaInvokeStub> {
  const instances = [await LambdaHost.start(name, env)];
  const idle = [...instances];
  const authorizations: string[] = [];
  const server = createServer((req, res) => {
    void (async () => {
      authorizations.push(String(req.headers.authorization ?? ""));
      const payload = JSON.parse(await read(req)) as unknown;
      let host = idle.pop();
      if (!host) instances.push((host = await LambdaHost.start(name, env)));
      try {
        const { result } = await host.invoke(payload, { timeoutMs: 30_000 });
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(result));
      } catch (error) {
        res.writeHead(200, { "x-amz-function-error": "Unhandled" }).end(JSON.stringify({ errorMessage: String(error) }));
      } finally {
        idle.push(host);
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    instances,
    authorizations,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await Promise.all(instances.map((h) => h.close()));
    },
  };
}
