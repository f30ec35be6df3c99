/**
 * @module live/collect-pool — a bounded-concurrency limiter for API calls. Written here because
 * it is ten lines and the collector needs it to accept work while it runs (nodes become ready one
 * by one), which array-mapping helpers do not offer.
 */

/** Runs at most `limit` tasks at a time; `run` resolves with the task's own result. */
export function createLimiter(limit: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  const max = Math.max(1, Math.floor(limit));
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= max) await new Promise<void>((resolve) => waiting.push(resolve));
    active++;
    try {
      return await task();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}
