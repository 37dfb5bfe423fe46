/**
 * The set of channels a scheduler can deliver through, looked up by the name a reminder
 * carries (`webhook`, `log`, …).
 */
import { ValidationError } from "../errors/index.js";
import type { Channel } from "./types.js";

/** Channels by name. Immutable once built. */
export class ChannelRegistry {
  private readonly byName: ReadonlyMap<string, Channel>;

  /**
   * @param channels the channels, each with a distinct `name`.
   * @throws ValidationError (field `channels`) when two channels share a name.
   */
  constructor(channels: Iterable<Channel>) {
    const map = new Map<string, Channel>();
    for (const channel of channels) {
      if (map.has(channel.name)) {
        throw new ValidationError({
          field: "channels",
          message: `two channels are named ${JSON.stringify(channel.name)}`,
        });
      }
      map.set(channel.name, channel);
    }
    this.byName = map;
  }

  /**
   * The channel with this name.
   * @throws ValidationError (field `channel`) for an unknown name, listing the known ones.
   */
  get(name: string): Channel {
    const channel = this.byName.get(name);
    if (!channel) {
      const known = this.names();
      throw new ValidationError({
        field: "channel",
        message: `unknown channel; known channels: ${known.length > 0 ? known.join(", ") : "(none)"}`,
        value: name,
      });
    }
    return channel;
  }

  /** Whether a channel with this name exists. */
  has(name: string): boolean {
    return this.byName.has(name);
  }

  /** The registered names, in registration order. */
  names(): string[] {
    return [...this.byName.keys()];
  }
}
