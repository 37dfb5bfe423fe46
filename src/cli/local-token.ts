/**
 * The local token (API-7): how `punctual webhook-secret` proves it runs on the machine
 * of a server that has no API key. `punctual start` generates a random token per run and
 * writes it in its data folder, readable by its user only (mode 0600); the API answers
 * `GET /v1/webhook-secret` without a key only to a request presenting it. Whoever can
 * read the file can read the embedded database beside it anyway, so the token grants
 * nothing the file system did not already.
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** Name of the token file in the data folder. */
export const LOCAL_TOKEN_FILE = "local-api-token";

/** Path of the token file of `dataDir`. */
export function localTokenPath(dataDir: string): string {
  return join(dataDir, LOCAL_TOKEN_FILE);
}

/**
 * Generates a token (32 random bytes, base64url) and writes it to `dataDir`, creating
 * the folder (mode 0700) when missing; an older token is replaced.
 * @returns the token.
 * @throws the file system error (EACCES, EROFS …).
 */
export async function writeLocalToken(dataDir: string): Promise<string> {
  const token = randomBytes(32).toString("base64url");
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const path = localTokenPath(dataDir);
  await writeFile(path, `${token}\n`, { mode: 0o600 });
  // The mode of writeFile only applies to a new file: tighten an existing one too.
  await chmod(path, 0o600);
  return token;
}

/** The token of `dataDir`, or null when there is none (no server ran there). */
export async function readLocalToken(dataDir: string): Promise<string | null> {
  try {
    const text = (await readFile(localTokenPath(dataDir), "utf8")).trim();
    return text === "" ? null : text;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

/** Removes the token file if it still holds `token` (a later server's token is kept). */
export async function removeLocalToken(dataDir: string, token: string): Promise<void> {
  if ((await readLocalToken(dataDir).catch(() => null)) === token) {
    await rm(localTokenPath(dataDir), { force: true });
  }
}
