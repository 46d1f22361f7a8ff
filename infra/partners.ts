// Partner assertions (API.md §21.1): the registry of partners and the audience their assertions name, read from the
// deploying shell (`PARTNERS=… PARTNER_ASSERTION_AUDIENCE=… npx sst deploy`) into the wallets function, the only one
// that serves routes accepting them. Public keys only, so plain environment variables; the function validates them
// at its start (shared/config.ts), and a malformed registry fails the deploy here first.

const partners = process.env.PARTNERS?.trim() || undefined;
if (partners !== undefined) {
  let parsed: unknown;
  try {
    parsed = JSON.parse(partners);
  } catch {
    parsed = undefined;
  }
  if (!Array.isArray(parsed)) throw new Error('PARTNERS must be a JSON array of partners (docs/decisions.md "Partners")');
}
const audience = process.env.PARTNER_ASSERTION_AUDIENCE?.trim() || undefined;

export const partnerEnvironment: Record<string, string> = {
  ...(partners !== undefined ? { PARTNERS: partners } : {}),
  ...(audience !== undefined ? { PARTNER_ASSERTION_AUDIENCE: audience } : {}),
};
