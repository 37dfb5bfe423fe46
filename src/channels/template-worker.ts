/**
 * Entry of a template render thread ({@link TemplateRenderPool}): answers
 * `{ id, template, context, textEscape }` with the rendered message, or with the error's
 * code and message. One render at a time; the pool ends the thread when one overruns.
 */
import { parentPort } from "node:worker_threads";
import { PunctualError } from "../errors/index.js";
import { renderOnThisThread } from "./template.js";
import type { RenderAnswer, RenderJob } from "./template-pool.js";

const port = parentPort;
if (port !== null) {
  port.on("message", (m: RenderJob & { id: number }) => {
    let answer: RenderAnswer;
    try {
      answer = {
        id: m.id,
        ok: true,
        message: renderOnThisThread(m.template, m.context, m.textEscape),
      };
    } catch (err) {
      answer = {
        id: m.id,
        ok: false,
        code: err instanceof PunctualError ? err.code : "TEMPLATE_FAILED",
        message: err instanceof Error ? err.message : String(err),
      };
    }
    port.postMessage(answer);
  });
  port.postMessage({ ready: true });
}
