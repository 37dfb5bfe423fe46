import { createPunctual } from "../src/index.js";
const p = await createPunctual({ databaseUrl: process.env.DATABASE_URL!, migrate: true, logLevel: "silent" });
await p.close();
