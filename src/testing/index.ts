/**
 * punctual/testing — the testing kit (API-8): test your reminders in your own suite
 * without real time. Explicit named exports only.
 *
 * ```ts
 * import { createTestScheduler } from "punctual/testing";
 * const s = await createTestScheduler({ now: "2027-03-22T07:00:00Z" });
 * await s.createSchedule({ dtstart: "2027-03-22T09:00:00", tzid: "Europe/Berlin",
 *   reminders: [{ key: "soon", offset: "-PT15M", channel: "mock" }] });
 * await s.runUntil("2027-03-22T08:00:00Z");
 * s.channel("mock").sends; // [{ dueAt: "2027-03-22T07:45:00.000Z", … }]
 * await s.close();
 * ```
 */
export { ManualClock, type Instant } from "./clock.js";
export {
  createMockChannel,
  MockChannel,
  type MockChannelOptions,
  type MockSend,
  type MockStep,
} from "./mock-channel.js";
export {
  createTestScheduler,
  type TestControls,
  type TestScheduler,
  type TestSchedulerOptions,
} from "./scheduler.js";
