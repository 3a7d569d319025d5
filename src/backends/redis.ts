/**
 * PLACEHOLDER — being written; replaced by the real backend.
 *
 * @module
 */
import type { Backend } from "../backend.ts";
import { InvalidArgument } from "../errors.ts";

/** Placeholder. */
export class RedisBackend {
  /**
   * Placeholder.
   * @param _url URL.
   * @returns Never.
   */
  static fromUrl(_url: string): Promise<Backend> {
    return Promise.reject(new InvalidArgument("This backend is not built yet."));
  }
}
