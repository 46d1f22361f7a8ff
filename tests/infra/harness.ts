/**
 * Runs inside the child process that tests/infra/graph.ts starts: builds the stage's resource graph the way
 * `sst deploy` runs `sst.config.ts`, but against Pulumi's mock monitor, so no AWS account is involved.
 *
 * What the SST CLI provides around the program is stood in for here: its local RPC server (only
 * `Provider.Aws.Bootstrap` and `Runtime.Build` are asked for on a deploy without `sst dev`), the secrets as
 * `SST_SECRET_<Name>` variables (set by graph.ts), and the AWS data sources every function reads (region,
 * account, partition, policy documents). Every registered resource and every build request is written to
 * `INFRA_GRAPH_OUT` as JSON.
 */
import * as pulumi from "@pulumi/pulumi";
import { createServer } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createHash, generateKeyPairSync } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface GraphResource {
  type: string;
  name: string;
  inputs: Record<string, unknown>;
  /** Resource options the mocks do not pass on: read from the registration request. */
  protect?: boolean;
  retainOnDelete?: boolean;
}

interface GraphBuild {
  functionID: string;
  handler: string;
  runtime: string;
  links: Record<string, unknown>;
}

export interface Graph {
  resources: GraphResource[];
  builds: GraphBuild[];
  outputs: Record<string, unknown>;
  /** The data sources the program read (`aws:kms/getKey:getKey`, …), with their inputs. */
  calls: { token: string; inputs: Record<string, unknown> }[];
}

const ACCOUNT = "123456789012";

/** The public half of every asymmetric KMS key the stage reads (`aws.kms.getPublicKey`): a P-256 key of this run. */
const KMS_PUBLIC_KEY = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey;
const REGION = "us-east-1";

/** Pulumi's wire form of a secret value. */
const SECRET_SIG = "4dabf18193072939515e22adb298388d";

/** Inputs with secret values replaced by the values themselves (the tests compare values). */
function reveal(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reveal);
  if (value && typeof value === "object") {
    const record = value as Record<string, unknown>;
    if (SECRET_SIG in record) return reveal(record.value);
    return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, reveal(v)]));
  }
  return value;
}

/** What the mock monitor answers for a resource: its inputs plus the outputs SST's components read. */
function state(type: string, name: string, inputs: Record<string, unknown>): Record<string, unknown> {
  const physical = typeof inputs.name === "string" ? inputs.name : `${name}-physical`;
  const service = type.split(":")[1]?.split("/")[0] ?? "x";
  const arn = `arn:aws:${service}:${REGION}:${ACCOUNT}:${physical}`;
  const extra: Record<string, unknown> = {};
  if (type === "aws:apigatewayv2/api:Api") {
    extra.apiEndpoint = `https://${name.toLowerCase()}.execute-api.${REGION}.amazonaws.com`;
    extra.executionArn = `arn:aws:execute-api:${REGION}:${ACCOUNT}:${name}`;
  }
  if (type === "aws:lambda/functionUrl:FunctionUrl") extra.functionUrl = `https://${name.toLowerCase()}.lambda-url.${REGION}.on.aws/`;
  if (type === "aws:cloudfront/distribution:Distribution") extra.domainName = `${name.toLowerCase()}.cloudfront.net`;
  // A random provider's result: stable per resource name, as a deploy keeps it in the stage's state.
  if (type === "random:index/randomPassword:RandomPassword")
    extra.result = createHash("sha256").update(name).digest("base64url").slice(0, Number(inputs.length));
  if (type === "aws:sqs/queue:Queue") extra.url = `https://sqs.${REGION}.amazonaws.com/${ACCOUNT}/${physical}`;
  return { ...inputs, name: physical, arn, ...extra };
}

function call({ token, inputs }: pulumi.runtime.MockCallArgs): Record<string, unknown> {
  switch (token) {
    case "aws:index/getRegion:getRegion":
      return { name: REGION, id: REGION, region: REGION };
    case "aws:index/getCallerIdentity:getCallerIdentity":
      return { accountId: ACCOUNT, arn: `arn:aws:iam::${ACCOUNT}:user/test`, userId: "test", id: ACCOUNT };
    case "aws:index/getPartition:getPartition":
      return { partition: "aws", dnsSuffix: "amazonaws.com", id: "aws" };
    case "aws:kms/getKey:getKey":
      return {
        arn: `arn:aws:kms:${REGION}:${ACCOUNT}:key/${String(inputs.keyId).replace(/\W+/g, "-")}`,
        id: inputs.keyId,
        keyId: inputs.keyId,
      };
    case "aws:kms/getPublicKey:getPublicKey":
      return {
        arn: inputs.keyId,
        id: inputs.keyId,
        keyId: inputs.keyId,
        keySpec: "ECC_NIST_P256",
        keyUsage: "SIGN_VERIFY",
        publicKey: KMS_PUBLIC_KEY.export({ type: "spki", format: "der" }).toString("base64"),
        publicKeyPem: KMS_PUBLIC_KEY.export({ type: "spki", format: "pem" }).toString(),
      };
    case "aws:iam/getPolicyDocument:getPolicyDocument":
      return {
        statements: inputs.statements,
        json: JSON.stringify({ Version: "2012-10-17", Statement: inputs.statements ?? [] }),
      };
    default:
      return {};
  }
}

interface RegisterRequest {
  getType(): string;
  getName(): string;
  getProtect(): boolean | undefined;
  getRetainondelete(): boolean | undefined;
}

/** The SST CLI's local RPC server, reduced to what a deploy of this app asks for. */
async function startRpcStub(builds: GraphBuild[]): Promise<() => void> {
  const out = mkdtempSync(join(tmpdir(), "infra-graph-"));
  writeFileSync(join(out, "index.mjs"), "export const handler = () => {};\n");
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      const { method, params, id } = JSON.parse(body) as { method: string; params: unknown[]; id: unknown };
      const args = (params?.[0] ?? {}) as Record<string, unknown>;
      let result: unknown;
      if (method === "Provider.Aws.Bootstrap") {
        result = { asset: "sst-asset", assetEcrRegistryId: ACCOUNT, assetEcrUrl: "ecr", state: "sst-state" };
      } else if (method === "Runtime.Build") {
        builds.push({
          functionID: String(args.functionID),
          handler: String(args.handler),
          runtime: String(args.runtime),
          links: (args.links ?? {}) as Record<string, unknown>,
        });
        result = { handler: String(args.handler), out, errors: [], sourcemaps: [] };
      }
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(result === undefined ? { id, error: `rpc: can't find ${method}` } : { id, result, error: null }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("the RPC stub has no port");
  process.env.SST_SERVER = `http://127.0.0.1:${address.port}`;
  return () => server.close();
}

/** @public Runs `program` (the bundled `run(mod.run)`) against the mocks and writes the graph to INFRA_GRAPH_OUT. */
export async function collect(stage: string, program: () => Promise<Record<string, unknown>>): Promise<void> {
  const graph: Graph = { resources: [], builds: [], outputs: {}, calls: [] };
  const stop = await startRpcStub(graph.builds);
  await pulumi.runtime.setMocks(
    {
      newResource: ({ type, name, inputs }) => {
        graph.resources.push({ type, name, inputs: reveal(inputs) as Record<string, unknown> });
        return { id: `${name}-id`, state: state(type, name, inputs) };
      },
      call: (args) => {
        graph.calls.push({ token: args.token, inputs: reveal(args.inputs) as Record<string, unknown> });
        return call(args);
      },
    },
    "workflow-automation",
    stage,
    false,
  );
  // As `pulumi up` runs a program: inside the root stack resource, whose outputs are the program's answer.
  // The mock monitor hands newResource neither `protect` nor `retainOnDelete`: read them from the request.
  const monitor = pulumi.runtime.getMonitor() as unknown as { registerResource: (req: RegisterRequest, cb: unknown) => unknown };
  const register = monitor.registerResource.bind(monitor);
  const options = new Map<string, { protect?: boolean; retainOnDelete?: boolean }>();
  monitor.registerResource = (req, cb) => {
    options.set(`${req.getType()} ${req.getName()}`, { protect: req.getProtect(), retainOnDelete: req.getRetainondelete() });
    return register(req, cb);
  };
  const outputs = await pulumi.runtime.runInPulumiStack(program);
  graph.outputs = await new Promise((resolve) => pulumi.output(outputs ?? {}).apply((v) => resolve(v as Record<string, unknown>)));
  await pulumi.runtime.disconnect();
  stop();
  for (const r of graph.resources) Object.assign(r, options.get(`${r.type} ${r.name}`));
  writeFileSync(process.env.INFRA_GRAPH_OUT!, JSON.stringify(graph));
}
