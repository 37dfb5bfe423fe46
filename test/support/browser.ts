/**
 * Real Chromium for the dashboard's browser tests (API-6): Debian's `chromium` package
 * (`/usr/bin/chromium`, installed by `.ci/run`), driven by `playwright-core`. Never a
 * browser download: without the binary the tests skip, saying so in their titles.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";

/** Where Debian installs Chromium (override with PUNCTUAL_CHROMIUM). */
export const CHROMIUM_PATH = process.env.PUNCTUAL_CHROMIUM ?? "/usr/bin/chromium";

/** Whether the browser tests can run here. */
export const HAS_CHROMIUM = existsSync(CHROMIUM_PATH);

/** Folder of the screenshots the browser tests write (git-ignored test artefacts). */
export const SCREENSHOT_DIR = join(process.cwd(), ".test-artifacts", "dashboard");

/**
 * Starts headless Chromium on a fresh profile folder (its `--user-data-dir`), with no
 * network of its own (no component updates, sync or background requests). `close` ends
 * it and removes the profile.
 */
export async function launchChromium(): Promise<{
  context: BrowserContext;
  close(): Promise<void>;
}> {
  const profile = mkdtempSync(join(tmpdir(), "punctual-chromium-"));
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  // playwright-core passes the profile folder as --user-data-dir itself.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
