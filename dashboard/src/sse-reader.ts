/**
 * The text/event-stream parser both streams of the dashboard read with (the
 * system-event stream and the live queries): fields id, event, data and
 * retry, comments skipped, CR, LF and CRLF line ends, a CR at the end of a
 * chunk held until the next one.
 */

/** One dispatched block: its `id:` (when it had one), `event:` ("" when none) and `data:` lines. */
export interface SseBlock {
  id: string | undefined;
  type: string;
  data: string[];
}

/**
 * Reads `body` until it ends or `live()` turns false; each block (blank line)
 * goes to `onBlock`, each valid `retry:` to `onRetry`.
 */
export async function readSse(
  body: ReadableStream<Uint8Array>,
  live: () => boolean,
  onBlock: (block: SseBlock) => void,
  onRetry: (ms: number) => void,
): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let block: SseBlock = { id: undefined, type: "", data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done || !live()) return;
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.search(/\r\n|\r|\n/)) !== -1) {
        // A CR at the end of a chunk may be the first half of CRLF: wait for the next chunk.
        if (nl === buffer.length - 1 && buffer.endsWith("\r")) break;
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
        if (line === "") {
          onBlock(block);
          block = { id: undefined, type: "", data: [] };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        let v = colon === -1 ? "" : line.slice(colon + 1);
        if (v.startsWith(" ")) v = v.slice(1);
        if (field === "id" && !v.includes("\0")) block.id = v;
        else if (field === "event") block.type = v;
        else if (field === "data") block.data.push(v);
        else if (field === "retry" && /^\d+$/.test(v)) onRetry(Number(v));
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** The `detail` of a problem+json answer, else its status text. */
export async function problemDetail(res: Response): Promise<string> {
  try {
    const p = (await res.json()) as { detail?: string };
    return p.detail ?? res.statusText;
  } catch {
    return res.statusText;
  }
}

/** The `code` and `detail` of a problem+json answer (`HTTP_<status>` and the status text when it has none). */
export async function problemOf(res: Response): Promise<{ code: string; detail: string }> {
  try {
    const p = (await res.json()) as { code?: string; detail?: string };
    return { code: p.code ?? `HTTP_${res.status}`, detail: p.detail ?? res.statusText };
  } catch {
    return { code: `HTTP_${res.status}`, detail: res.statusText };
  }
}
