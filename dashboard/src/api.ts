/**
 * The dashboard's only way to the server: mneme's public HTTP API
 * (docs/http.md), with the session token in `Authorization: Bearer` and the
 * chosen identity in `X-Identity-Uuid`. Cookies are never used, so no request
 * of the page can be forged by another site.
 */
import type { ListBody, Session } from "./types.js";

/** A problem+json answer (or a network failure: status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(detail);
  }
}

const STORAGE_KEY = "mneme.dashboard.session";

export class Api {
  /** The API's root URL (ends with "/"), e.g. `https://host/mneme/`. */
  readonly base: URL;
  private current: Session | undefined;
  /** Called when the server no longer accepts the session (401). */
  onSessionEnded: (detail: string) => void = () => undefined;

  constructor(base: URL) {
    this.base = base;
    this.current = readStoredSession();
  }

  get session(): Session | undefined {
    return this.current;
  }

  set session(session: Session | undefined) {
    this.current = session;
    // sessionStorage: one tab, gone when it closes; the token never reaches a cookie.
    if (session === undefined) sessionStorage.removeItem(STORAGE_KEY);
    else sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
  }

  /** A runtime route of the session's tenant: `api/tenants/{t}/runtime/<path>`. */
  runtimePath(path: string): string {
    return `${this.tenantPath()}/runtime/${path}`;
  }

  /** The generic route of a query of the session's tenant: `api/tenants/{t}/queries/{domain}/{name}`. */
  tenantQueryPath(domain: string, name: string): string {
    return `${this.tenantPath()}/queries/${encodeURIComponent(domain)}/${encodeURIComponent(name)}`;
  }

  /** A query of the session's tenant through the generic route (one answer; `LiveQuery` follows one). */
  query<T>(domain: string, name: string, payload: unknown): Promise<T> {
    return this.post<T>(this.tenantQueryPath(domain, name), payload);
  }

  /** A command of the session's tenant through the generic route; resolves with the command's `result`. */
  async command<T>(domain: string, name: string, payload: unknown): Promise<T> {
    const out = await this.post<{ result?: T }>(
      `${this.tenantPath()}/commands/${encodeURIComponent(domain)}/${encodeURIComponent(name)}`,
      payload,
    );
    return out.result as T;
  }

  /** The session tenant's part of the API: `api/tenants/{t}`. */
  tenantPath(): string {
    return `api/tenants/${encodeURIComponent(this.current?.tenantUuid ?? "")}`;
  }

  url(path: string): URL {
    return new URL(path, this.base);
  }

  /** The credential headers of the session. */
  headers(): Record<string, string> {
    const s = this.current;
    if (s === undefined) return {};
    return { authorization: `Bearer ${s.token}`, "x-identity-uuid": s.identityUuid };
  }

  get<T>(path: string): Promise<T> {
    return this.request<T>("GET", path);
  }

  /**
   * Every item of a list endpoint, page after page at the server's own page
   * size (a fixed large pageSize would be refused where maxPageSize is lower).
   */
  async getAll<T>(path: string): Promise<T[]> {
    const items: T[] = [];
    for (let page = 1; ; page++) {
      const sep = path.includes("?") ? "&" : "?";
      const body = await this.get<ListBody<T>>(`${path}${sep}page=${page}`);
      items.push(...body.items);
      if (body.items.length === 0 || items.length >= body.total) return items;
    }
  }

  post<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>("POST", path, body);
  }

  async request<T>(method: string, path: string, body?: unknown, anonymous = false): Promise<T> {
    const headers: Record<string, string> = anonymous ? {} : this.headers();
    if (body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await fetch(this.url(path), {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        cache: "no-store",
      });
    } catch (e) {
      throw new ApiError(0, "NETWORK", `the server cannot be reached (${String(e)})`);
    }
    if (res.status === 204) return undefined as T;
    const text = await res.text();
    let json: unknown;
    try {
      json = text === "" ? null : JSON.parse(text);
    } catch {
      throw new ApiError(res.status, "INVALID_RESPONSE", `the server answered ${res.status} with a body that is not JSON`);
    }
    if (!res.ok) {
      const p = (json ?? {}) as { code?: string; detail?: string };
      const err = new ApiError(res.status, p.code ?? `HTTP_${res.status}`, p.detail ?? res.statusText);
      if (res.status === 401 && !anonymous && this.current !== undefined) this.onSessionEnded(err.detail);
      throw err;
    }
    return json as T;
  }
}

function readStoredSession(): Session | undefined {
  const raw = sessionStorage.getItem(STORAGE_KEY);
  if (raw === null) return undefined;
  try {
    const s = JSON.parse(raw) as Session;
    return typeof s.token === "string" && typeof s.identityUuid === "string" ? s : undefined;
  } catch {
    return undefined;
  }
}
