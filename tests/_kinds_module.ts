/**
 * A module of typed kinds, as `mcpstate serve --kinds` loads it: `research`
 * at schema version 2 (its sources became objects), with the step up from
 * version 1.
 *
 * @module
 */

import { z } from "zod";
import { defineKind } from "../mod.ts";

/** Version 1 of research: sources are URLs. */
export const ResearchV1 = z.object({ sources: z.array(z.string()), notes: z.string() });

/** Version 2: each source is an object. */
export const ResearchV2 = z.object({
  sources: z.array(z.object({ url: z.string(), read: z.boolean() })),
  notes: z.string().max(200),
});

/** The kinds the server validates. */
export const kinds = [
  defineKind("research", ResearchV2, {
    version: 2,
    upcast: {
      1: (s: z.output<typeof ResearchV1>) => ({
        ...s,
        sources: s.sources.map((url) => ({ url, read: false })),
      }),
    },
  }),
];
