/**
 * A small client for the running server's HTTP API, used by the `schedules`,
 * `deliveries`, `import`, `status` and `healthcheck` commands. The API key comes from
 * `PUNCTUAL_API_KEY` (never from a flag, so it stays out of `ps` and shell history).
 */
import type { ErrorBody } from "../contracts/index.js";
import { ApiError, CliError, EXIT_FAILURE } from "./errors.js";

/** Where the server is and how to authenticate. */
export interface ClientOptions {
  url: string;
  apiKey?: string | undefined;
  /** API-2: the tenant the operator's key acts for (sent as `Punctual-Tenant`). */
  tenant?: string | undefined;
  /** Request timeout, ms. Default 30 s. */
  timeoutMs?: number;
}

/** A reply: status, headers and parsed JSON (or text for non-JSON replies). */
export interface ApiReply<T> {
  status: number;
  headers: Headers;
  body: T;
}

function isErrorBody(value: unknown): value is ErrorBody {
  const error = (value as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return typeof error?.code === "string" && typeof error.message === "string";
}

/** Talks to one punctual server. */
export class ApiClient {
  readonly #base: string;
  readonly #apiKey: string | undefined;
  readonly #tenant: string | undefined;
  readonly #timeoutMs: number;

  constructor(options: ClientOptions) {
    this.#base = options.url.replace(/\/+$/, "");
    this.#apiKey = options.apiKey || undefined;
    this.#tenant = options.tenant || undefined;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
  }

  /**
   * Sends a request. Resolves for any status when `allowError` is set; otherwise a 4xx
   * or 5xx becomes an {@link ApiError}.
   * @throws CliError when the server cannot be reached.
   */
  async request<T>(
    method: string,
    path: string,
    options: {
      body?: unknown;
      /** A body sent as is (not as JSON), with its Content-Type. Wins over `body`. */
      rawBody?: { text: string; contentType: string };
      /** Repeated values become repeated parameters (`?remind=a&remind=b`). */
      query?: Record<string, string | number | readonly string[] | undefined>;
      headers?: Record<string, string>;
      allowError?: boolean;
      /** Timeout of this request, ms (default: the client's). */
      timeoutMs?: number;
    } = {},
  ): Promise<ApiReply<T>> {
    const url = new URL(this.#base + path);
    for (const [k, v] of Object.entries(options.query ?? {})) {
      if (Array.isArray(v)) for (const item of v) url.searchParams.append(k, String(item));
      else if (v !== undefined && v !== "") url.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    if (this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`;
    if (this.#tenant) headers["punctual-tenant"] = this.#tenant;
    let sent: string | undefined;
    if (options.rawBody !== undefined) {
      headers["content-type"] = options.rawBody.contentType;
      sent = options.rawBody.text;
    } else if (options.body !== undefined) {
      headers["content-type"] = "application/json";
      sent = JSON.stringify(options.body);
    }
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers,
        ...(sent !== undefined ? { body: sent } : {}),
        signal: AbortSignal.timeout(options.timeoutMs ?? this.#timeoutMs),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const why =
        cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
      throw new CliError(
        `Cannot reach punctual at ${this.#base} (${why}). Is \`punctual start\` running? Point --url or PUNCTUAL_URL at it.`,
        EXIT_FAILURE,
      );
    }
    const text = await response.text();
    let body: unknown = text;
    if ((response.headers.get("content-type") ?? "").includes("json") && text) {
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    }
    if (response.status >= 400 && !options.allowError) {
      throw new ApiError(
        response.status,
        isErrorBody(body)
          ? body
          : { error: { code: `HTTP_${response.status}`, message: String(text).slice(0, 500) } },
      );
    }
    return { status: response.status, headers: response.headers, body: body as T };
  }

  /** GET and return the JSON body. */
  async get<T>(path: string, query?: Record<string, string | number | undefined>): Promise<T> {
    return (await this.request<T>("GET", path, query ? { query } : {})).body;
  }

  /** POST and return the JSON body. */
  async post<T>(path: string, body?: unknown): Promise<T> {
    return (await this.request<T>("POST", path, body === undefined ? {} : { body })).body;
  }

  /** DELETE and return the JSON body. */
  async delete<T>(path: string): Promise<T> {
    return (await this.request<T>("DELETE", path)).body;
  }
}
