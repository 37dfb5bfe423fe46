/**
 * `punctual tenant-secret show|rotate|remove` (CH-1, API-2): the caller's tenant's own
 * webhook signing secret, through the running server's API like the other remote
 * commands. Needs a key with the `admin` scope (or the operator's key).
 */
import { InvalidArgumentError, type Command } from "commander";
import type { TenantWebhookSecretView } from "../contracts/webhook-secrets.js";
import { jsonText } from "./format.js";
import type { CommandKit } from "./rate-limits.js";
import { clientFor, type RemoteFlags } from "./remote.js";
import type { Io } from "./run.js";

/** Flags of `tenant-secret rotate`. */
export interface TenantSecretRotateFlags extends RemoteFlags {
  secret?: string;
  overlap?: number;
}

const PATH = "/v1/tenant-webhook-secret";

function printSecret(s: TenantWebhookSecretView, io: Io): void {
  io.out(`${s.secret}\n`);
  io.err(
    s.overlapUntil === null
      ? `(signs tenant ${s.tenant}'s webhooks)\n`
      : `(signs tenant ${s.tenant}'s webhooks; the secret it replaced signs beside it until ${s.overlapUntil})\n`,
  );
}

/** `tenant-secret show`. */
export async function tenantSecretShow(flags: RemoteFlags, io: Io): Promise<void> {
  const s = await clientFor(flags).get<TenantWebhookSecretView>(PATH);
  if (flags.json) return io.out(jsonText(s));
  printSecret(s, io);
}

/** `tenant-secret rotate [--secret whsec_…] [--overlap seconds]`. */
export async function tenantSecretRotate(flags: TenantSecretRotateFlags, io: Io): Promise<void> {
  const body = {
    ...(flags.secret !== undefined ? { secret: flags.secret } : {}),
    ...(flags.overlap !== undefined ? { overlapSeconds: flags.overlap } : {}),
  };
  const reply = await clientFor(flags).request<TenantWebhookSecretView>("POST", PATH, { body });
  if (flags.json) return io.out(jsonText(reply.body));
  printSecret(reply.body, io);
}

/** `tenant-secret remove`. */
export async function tenantSecretRemove(flags: RemoteFlags, io: Io): Promise<void> {
  await clientFor(flags).request("DELETE", PATH);
  if (flags.json) return io.out(jsonText({ removed: true }));
  io.out("The tenant's own secret is removed: the default secret signs its webhooks again.\n");
}

const seconds = (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) {
    throw new InvalidArgumentError("must be a whole number of seconds.");
  }
  return n;
};

/** Adds `tenant-secret show|rotate|remove` to `program`. */
export function addTenantSecretCommands(program: Command, kit: CommandKit): void {
  const { io, remoteOptions, example } = kit;
  const group = program
    .command("tenant-secret")
    .description(
      "The tenant's own webhook signing secret: it signs that tenant's webhooks instead of the default secret.",
    );
  remoteOptions(group.command("show").description("Print the tenant's own secret."))
    .addHelpText("after", example(["punctual tenant-secret show"]))
    .action((flags: RemoteFlags) => tenantSecretShow(flags, io));
  remoteOptions(
    group
      .command("rotate")
      .description(
        "Set or rotate the tenant's own secret; the one that signed until now signs beside it during the overlap.",
      )
      .option("--secret <whsec>", "the new secret (default: a random one)")
      .option(
        "--overlap <seconds>",
        "how long the old secret still signs (default 86400)",
        seconds,
      ),
  )
    .addHelpText(
      "after",
      example(["punctual tenant-secret rotate", "punctual tenant-secret rotate --overlap 3600"]),
    )
    .action((flags: TenantSecretRotateFlags) => tenantSecretRotate(flags, io));
  remoteOptions(
    group
      .command("remove")
      .description("Remove the tenant's own secret: the default signs its webhooks again."),
  )
    .addHelpText("after", example(["punctual tenant-secret remove"]))
    .action((flags: RemoteFlags) => tenantSecretRemove(flags, io));
}
