/**
 * A real SMTP server on 127.0.0.1 (port 0), the receiving end of e-mail channel tests
 * (the `smtp-server` package). Each step can be answered with an SMTP error reply, and the
 * reply to a message can be held back to model a server that goes silent after DATA.
 */
import type { AddressInfo } from "node:net";
import { SMTPServer, type SMTPServerAddress, type SMTPServerSession } from "smtp-server";

/** One message the server accepted (or was given, when its reply is held). */
export interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
  /** Header values by lower-case name (first occurrence). */
  headers: Record<string, string>;
}

/** An SMTP reply the server answers a step with: `{ code: 550, message: "…" }`. */
export interface Reply {
  code: number;
  message: string;
}

export interface SmtpReceiver {
  port: number;
  /** `smtp://127.0.0.1:<port>` (with `user:pass@…?insecure=true` when the server requires AUTH: it has no TLS). */
  url: string;
  mails: ReceivedMail[];
  /** Reply at connection (greeting), else 220. */
  onConnect: () => Reply | null;
  /** Reply to each RCPT TO, else 250. */
  onRcpt: (address: string) => Reply | null;
  /** Reply after the message, else 250; `"hold"` never answers (the message is recorded). */
  onData: (mail: ReceivedMail) => Reply | "hold" | null;
  /** Resolves each time a message has been received in full. */
  nextMail(): Promise<ReceivedMail>;
  close(): Promise<void>;
}

function smtpError(reply: Reply): Error {
  return Object.assign(new Error(reply.message), { responseCode: reply.code });
}

function headersOf(raw: string): Record<string, string> {
  const head = raw.split(/\r?\n\r?\n/)[0] ?? "";
  const out: Record<string, string> = {};
  for (const line of head.replace(/\r?\n[ \t]+/g, " ").split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i <= 0) continue;
    const name = line.slice(0, i).trim().toLowerCase();
    out[name] ??= line.slice(i + 1).trim();
  }
  return out;
}

/**
 * Starts the server; with `auth`, it requires AUTH PLAIN/LOGIN with those credentials.
 * `authFailure` gives the text of the 535 reply to wrong credentials (a server that echoes
 * what it was sent); default "authentication failed".
 */
export async function startSmtpReceiver(
  options: {
    auth?: { user: string; pass: string };
    authFailure?: (user: string, pass: string) => string;
  } = {},
): Promise<SmtpReceiver> {
  const waiters: Array<(m: ReceivedMail) => void> = [];
  const held: Array<() => void> = [];
  const receiver: SmtpReceiver = {
    port: 0,
    url: "",
    mails: [],
    onConnect: () => null,
    onRcpt: () => null,
    onData: () => null,
    nextMail: () => new Promise((resolve) => waiters.push(resolve)),
    close: async () => {},
  };
  const server = new SMTPServer({
    secure: false,
    disabledCommands: options.auth ? ["STARTTLS"] : ["STARTTLS", "AUTH"],
    authOptional: !options.auth,
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === options.auth?.user && auth.password === options.auth?.pass) {
        callback(null, { user: auth.username });
      } else {
        const text =
          options.authFailure?.(auth.username ?? "", auth.password ?? "") ??
          "authentication failed";
        callback(Object.assign(new Error(text), { responseCode: 535 }));
      }
    },
    onConnect(_session: SMTPServerSession, callback) {
      const reply = receiver.onConnect();
      callback(reply ? smtpError(reply) : null);
    },
    onRcptTo(address: SMTPServerAddress, _session, callback) {
      const reply = receiver.onRcpt(address.address);
      callback(reply ? smtpError(reply) : null);
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        const mail: ReceivedMail = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          raw,
          headers: headersOf(raw),
        };
        const reply = receiver.onData(mail);
        if (reply === "hold") {
          receiver.mails.push(mail);
          held.push(() => callback(null));
        } else if (reply) {
          callback(smtpError(reply));
        } else {
          receiver.mails.push(mail);
          callback(null);
        }
        for (const w of waiters.splice(0)) w(mail);
      });
    },
  });
  server.on("error", () => {
    // a client that hangs up mid-session is part of the tests
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.server.address() as AddressInfo;
  receiver.port = port;
  receiver.url = options.auth
    ? `smtp://${encodeURIComponent(options.auth.user)}:${encodeURIComponent(options.auth.pass)}@127.0.0.1:${port}?insecure=true`
    : `smtp://127.0.0.1:${port}`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      for (const release of held.splice(0)) release();
      server.close(() => resolve());
    });
  return receiver;
}
