/**
 * `punctual api-keys create|list|revoke` (API-2): tenant keys through the HTTP API.
 */
import type { ApiKeyView, CreatedApiKey } from "../app/api-keys.js";
import type { Column } from "./format.js";
import { clientFor, printPages, type PageFlags, type RemoteFlags } from "./remote.js";
import type { Io } from "./run.js";

const keyColumns: Column<ApiKeyView>[] = [
  { header: "ID", cell: (k) => k.id },
  { header: "TENANT", cell: (k) => k.tenant },
  { header: "NAME", cell: (k) => k.name },
  { header: "SCOPES", cell: (k) => k.scopes.join(",") },
  { header: "PREFIX", cell: (k) => k.prefix },
  { header: "CREATED", cell: (k) => k.createdAt },
  { header: "REVOKED", cell: (k) => k.revokedAt ?? "" },
  { header: "LAST USED", cell: (k) => k.lastUsedAt ?? "" },
];

const jsonText = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** `api-keys create --tenant T --scopes read,write --name N`: prints the key once. */
export async function apiKeysCreate(
  flags: RemoteFlags & { tenant?: string; scopes: string; name: string },
  io: Io,
): Promise<void> {
  const created = await clientFor(flags).post<CreatedApiKey>("/v1/api-keys", {
    ...(flags.tenant ? { tenant: flags.tenant } : {}),
    scopes: flags.scopes
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
    name: flags.name,
  });
  if (flags.json) return io.out(jsonText(created));
  io.out(
    `Created key ${created.id} for tenant ${created.tenant} (${created.scopes.join(", ")}).\n` +
      `Key (shown this once; only its hash is stored):\n${created.key}\n`,
  );
}

/**
 * `api-keys list [--tenant T] [--revoked] [--order asc|desc] [--limit N] [--cursor C] [--all]`:
 * one page (API-3), or with `--all` every page.
 */
export async function apiKeysList(
  flags: RemoteFlags & PageFlags & { tenant?: string; revoked?: boolean },
  io: Io,
): Promise<void> {
  await printPages<ApiKeyView>(
    flags,
    io,
    "/v1/api-keys",
    { tenant: flags.tenant, revoked: flags.revoked ? "true" : undefined },
    keyColumns,
  );
}

/** `api-keys revoke <id>`. */
export async function apiKeysRevoke(id: string, flags: RemoteFlags, io: Io): Promise<void> {
  const key = await clientFor(flags).delete<ApiKeyView>(`/v1/api-keys/${encodeURIComponent(id)}`);
  if (flags.json) return io.out(jsonText(key));
  io.out(`Key ${key.id} (${key.prefix}…) of tenant ${key.tenant} is revoked.\n`);
}
