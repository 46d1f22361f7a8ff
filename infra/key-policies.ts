// Who may sign with the stage's signing keys, in the keys' own policies (infra/kms.ts signingKeyPolicy): the token
// key's is the sign-in function (core); the controller key's are the functions that send user operations (wallets:
// withdrawals; the runner: a workflow's on-chain steps). The previews' shared development controller key is not
// the stage's: its policy is set once per account (docs/deploy.md, "Keys").
import { core, wallets } from "./api";
import { runner } from "./runner";
import { keyPermissions, ownControllerKeyId, signingKeyPolicy, tokenKey } from "./kms";

/** The role a function runs as (its ARN). */
const roleOf = (fn: $util.Input<sst.aws.Function>) => $util.output(fn).apply((f) => f.nodes.function.role);

signingKeyPolicy("TokenKeyPolicy", tokenKey.id, [roleOf(core)], keyPermissions.signTokens.actions, { replaceable: true });

if (ownControllerKeyId)
  signingKeyPolicy("ControllerKeyPolicy", ownControllerKeyId, [roleOf(wallets), roleOf(runner)], keyPermissions.sign.actions);
