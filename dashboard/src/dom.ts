/**
 * The whole rendering layer: `h()` builds elements from a tag, attributes and
 * children. Text always goes in as text nodes, never as HTML, so a payload from
 * the server cannot inject markup; and there is no inline style or script (the
 * page's Content-Security-Policy forbids both).
 */
export type Child = Node | string | number | null | undefined | false | readonly Child[];
export type Attrs = Readonly<Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  applyAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element; attributes are set as they are named (viewBox, stroke-width). */
export function s<K extends keyof SVGElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  applyAttrs(el, attrs);
  append(el, children);
  return el;
}

function applyAttrs(el: Element, attrs: Attrs | null | undefined): void {
  if (attrs === null || attrs === undefined) return;
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === "function") el.addEventListener(name.replace(/^on/, ""), value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
}

function append(el: Element, children: readonly Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c as readonly Child[]);
    else if (c instanceof Node) el.append(c);
    else el.append(document.createTextNode(String(c as string | number)));
  }
}

/** Replaces an element's children. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}
