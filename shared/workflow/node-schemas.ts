import * as v from "valibot";
import { Uint256String } from "../http/validate";
import { AddressString } from "../http/address-schemas";
import { RESERVED_WORDS } from "../templates";
import {
  type DefinitionLimits,
  NODE_TYPES,
  type NodeType,
  RUNNER_TYPES,
  record,
  NAME_PATTERN,
  IdString,
  NameString,
  ChainId,
  AddressOrTemplate,
  NonZeroAddressOrTemplate,
  Uint256OrTemplate,
  AmountOrTemplate,
  HexOrTemplate,
  UrlOrTemplate,
  TemplateText,
  WholeTemplate,
  ContractAbi,
  MethodCall,
  strict,
  opt,
  str,
  bool,
  list,
  stringMap,
  TemplatedAny,
} from "./schema-kit";

/** The node configs (§8.4), the loop's runner and the Node variant for the given limits (built after the trigger's). */
export function nodeSchemas(limits: DefinitionLimits) {
  // Node configs (§8.4) ----------------------------------------------------------------------------------
  const source = v.pipe(
    str(),
    v.minBytes(1, "must not be empty"),
    v.maxBytes(limits.maxSourceBytes, `must be at most ${limits.maxSourceBytes} bytes`),
  );
  const expression = v.pipe(str(), v.maxBytes(4096, "must be at most 4096 bytes"));

  const EthTransferConfig = strict({
    destination: NonZeroAddressOrTemplate,
    amount: AmountOrTemplate,
    chainId: opt(ChainId),
  });
  const ContractWriteConfig = strict(
    {
      contractAddress: AddressOrTemplate,
      callData: opt(HexOrTemplate),
      methodCalls: opt(list(MethodCall, 1, 20, "method calls")),
      contractAbi: opt(ContractAbi),
      value: opt(Uint256OrTemplate),
      gasLimit: opt(Uint256String),
      isSimulated: opt(bool(), false),
      chainId: opt(ChainId),
    },
    'contractWrite. Exactly one of `callData` and `methodCalls`; `contractAbi` required when a method call has no `callData`; `value` (default "0") only with `callData` or a single method call.',
  );
  const ContractReadConfig = strict({
    contractAddress: AddressOrTemplate,
    contractAbi: ContractAbi,
    methodCalls: list(MethodCall, 1, 50, "method calls"),
    chainId: opt(ChainId),
  });
  const GraphqlQueryConfig = strict({
    url: UrlOrTemplate,
    query: v.pipe(TemplateText, v.maxBytes(limits.maxSourceBytes, `must be at most ${limits.maxSourceBytes} bytes`)),
    variables: opt(record(str(), TemplateText, "must be an object of strings")),
  });
  const methodPattern = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    .map((m) => [...m].map((c) => `[${c}${c.toLowerCase()}]`).join(""))
    .join("|");
  const RestApiConfig = strict(
    {
      url: UrlOrTemplate,
      method: v.pipe(
        str(),
        v.regex(new RegExp(`^(?:${methodPattern})$`), "must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"),
        v.description("GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS, case-insensitive, stored uppercase."),
        v.transform((m) => m.toUpperCase() as "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS"),
      ),
      headers: opt(stringMap(TemplateText, 50)),
      body: opt(TemplateText),
      options: opt(v.pipe(record(str(), TemplatedAny), v.description("Accepted for client compatibility; no effect."))),
    },
    "restApi. `body` is not allowed with GET or HEAD.",
  );
  const CustomCodeConfig = strict({
    lang: opt(v.literal("javascript", "must be javascript"), "javascript"),
    source: v.pipe(source, v.description(`JavaScript function body, 1 to ${limits.maxSourceBytes} bytes.`)),
  });
  const BranchCondition = strict(
    {
      id: IdString,
      type: opt(v.picklist(["if", "elseIf", "else"], "must be if, elseIf or else")),
      expression,
    },
    "BranchCondition. `type` is inferred when absent: `if` for the first, `else` for a last one with an empty expression, `elseIf` otherwise. The first is `if`, `if` only first, `else` at most once and last with an empty expression; only `else` may have an empty expression. Ids unique within the branch.",
  );
  const BranchConfig = strict({ conditions: list(BranchCondition, 1, 20, "conditions") });
  const FilterConfig = strict({
    inputVariable: WholeTemplate,
    expression: v.pipe(
      expression,
      v.check((s) => s.trim() !== "", "must not be empty"),
    ),
  });
  const BalanceConfig = strict(
    {
      address: AddressOrTemplate,
      chainId: opt(ChainId),
      chain: opt(
        v.pipe(
          str(),
          v.regex(/^(?:0|[1-9][0-9]{0,15})$/, "must be a chain id as a decimal string"),
          v.description("Compatibility alias of `chainId`; must agree with it when both are set."),
        ),
      ),
      tokenAddresses: opt(list(AddressString, 0, 50, "addresses")),
      includeSpam: opt(TemplatedAny),
      includeZeroBalances: opt(TemplatedAny),
      minUsdValueCents: opt(TemplatedAny),
    },
    "balance. `includeSpam`, `includeZeroBalances` and `minUsdValueCents` are accepted for client compatibility and have no effect.",
  );

  const runnerOption = <const T extends (typeof RUNNER_TYPES)[number], const C extends v.GenericSchema>(type: T, config: C) =>
    strict({ type: v.literal(type), config, id: opt(IdString), name: opt(NameString) });
  const LoopRunner = v.variant(
    "type",
    [
      runnerOption("ethTransfer", EthTransferConfig),
      runnerOption("contractWrite", ContractWriteConfig),
      runnerOption("contractRead", ContractReadConfig),
      runnerOption("graphqlQuery", GraphqlQueryConfig),
      runnerOption("restApi", RestApiConfig),
      runnerOption("customCode", CustomCodeConfig),
    ],
    `must be one of ${RUNNER_TYPES.join(", ")}`,
  );
  const LoopConfig = strict({
    inputVariable: WholeTemplate,
    iterVar: opt(
      v.pipe(
        str(),
        v.regex(NAME_PATTERN, "must be a JavaScript identifier that is not a reserved word (value is allowed)"),
        v.notValues(
          RESERVED_WORDS.filter((w) => w !== "value"),
          "must be a JavaScript identifier that is not a reserved word (value is allowed)",
        ),
        v.description("Default `value`. Must not equal a trigger or node name or `index`."),
      ),
      "value",
    ),
    executionMode: opt(v.picklist(["sequential", "parallel"], "must be sequential or parallel"), "sequential"),
    runner: LoopRunner,
  });

  const nodeOption = <const T extends NodeType, const C extends v.GenericSchema>(type: T, config: C) =>
    strict({ id: IdString, name: NameString, type: v.literal(type), config });
  const Node = v.variant(
    "type",
    [
      nodeOption("ethTransfer", EthTransferConfig),
      nodeOption("contractWrite", ContractWriteConfig),
      nodeOption("contractRead", ContractReadConfig),
      nodeOption("graphqlQuery", GraphqlQueryConfig),
      nodeOption("restApi", RestApiConfig),
      nodeOption("customCode", CustomCodeConfig),
      nodeOption("branch", BranchConfig),
      nodeOption("filter", FilterConfig),
      nodeOption("loop", LoopConfig),
      nodeOption("balance", BalanceConfig),
    ],
    `must be one of ${NODE_TYPES.join(", ")}`,
  );

  return {
    EthTransferConfig,
    ContractWriteConfig,
    ContractReadConfig,
    GraphqlQueryConfig,
    RestApiConfig,
    CustomCodeConfig,
    BranchCondition,
    BranchConfig,
    FilterConfig,
    LoopRunner,
    LoopConfig,
    BalanceConfig,
    Node,
  };
}
