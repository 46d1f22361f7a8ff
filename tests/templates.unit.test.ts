/**
 * Templates and variables (API.md §8.6): the path grammar, the paths-only rule, resolution with
 * TEMPLATE_UNRESOLVED, rendering rules, whole-template values, and what a config refers to. Pure functions.
 */
import { describe, expect, it } from "vitest";
import {
  PATHS_ONLY_MESSAGE,
  RESERVED_WORDS,
  TemplateUnresolvedError,
  findTemplates,
  isReservedWord,
  parsePath,
  referencedPaths,
  referencedRoots,
  referencedSecretNames,
  renderConfig,
  renderString,
  renderValue,
  resolvePath,
  resolveWhole,
  templateProblem,
  wholeTemplatePath,
} from "../shared/templates";

const unresolved = (fn: () => unknown): TemplateUnresolvedError => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(TemplateUnresolvedError);
    return e as TemplateUnresolvedError;
  }
  throw new Error("expected TEMPLATE_UNRESOLVED");
};

describe("path grammar", () => {
  it("parses identifiers, .digits, [digits], ['text'] and [\"text\"] segments", () => {
    expect(parsePath(`fetch.data.items[0].name['first name']["x.y"].1`)).toEqual({
      text: `fetch.data.items[0].name['first name']["x.y"].1`,
      root: "fetch",
      segments: [
        { kind: "key", key: "data" },
        { kind: "key", key: "items" },
        { kind: "index", key: "0", index: 0 },
        { kind: "key", key: "name" },
        { kind: "key", key: "first name" },
        { kind: "key", key: "x.y" },
        { kind: "index", key: "1", index: 1 },
      ],
    });
    expect(parsePath("$a._b$")).toMatchObject({ root: "$a", segments: [{ kind: "key", key: "_b$" }] });
    expect(parsePath("items.0")).toMatchObject({ segments: [{ kind: "index", index: 0 }] });
    expect(parsePath("items[0]")).toMatchObject({ segments: [{ kind: "index", index: 0 }] });
  });

  it("rejects anything that is not a path", () => {
    for (const bad of ["", "1a", "a.", "a..b", "a[x]", "a['x]", `a["x']`, "a + b", "a.b-c", "a[-1]", "a()", "a .b", "a[ 0 ]", "a.b?.c"]) {
      expect(parsePath(bad), bad).toBeNull();
    }
  });

  it("finds templates with or without spaces inside the braces", () => {
    const found = findTemplates("a {{x.y}} b {{  z[0]  }} c");
    expect(found.map((t) => [t.raw, t.path?.text])).toEqual([
      ["{{x.y}}", "x.y"],
      ["{{  z[0]  }}", "z[0]"],
    ]);
    expect(found[0]).toMatchObject({ start: 2, end: 9 });
  });

  it("reads a path whose quoted text contains closing braces", () => {
    expect(findTemplates(`{{a['}}']}}`).map((t) => t.path?.segments)).toEqual([[{ kind: "key", key: "}}" }]]);
  });

  it("marks expressions and unclosed templates as not paths", () => {
    expect(findTemplates("{{ a + 1 }} and {{b}}").map((t) => t.path?.text ?? null)).toEqual([null, "b"]);
    expect(findTemplates("x {{ a").map((t) => [t.raw, t.path])).toEqual([["{{ a", null]]);
  });

  it("accepts templated fields whose templates are all paths, and refuses expressions with the contract's message", () => {
    expect(templateProblem("no template")).toBeNull();
    expect(templateProblem("https://x/{{ fetch.data.id }}/{{settings.runner}}")).toBeNull();
    expect(templateProblem("{{ a.b + 1 }}")).toBe(PATHS_ONLY_MESSAGE);
    expect(templateProblem("{{a}} {{ fn() }}")).toBe("templates accept paths only; use a customCode node for expressions");
    expect(templateProblem("{{ unclosed")).toBe(PATHS_ONLY_MESSAGE);
  });

  it("reads a filter/loop inputVariable as one whole template or a bare path", () => {
    expect(wholeTemplatePath("{{ fetch.data.items }}")?.text).toBe("fetch.data.items");
    expect(wholeTemplatePath("fetch.data.items")?.text).toBe("fetch.data.items");
    expect(wholeTemplatePath("{{a}} {{b}}")).toBeNull();
    expect(wholeTemplatePath("x {{a}}")).toBeNull();
  });
});

describe("resolution", () => {
  const vars = {
    fetch: { data: { items: [{ id: 7 }, { id: 8 }], "first name": "Ada", "0": "zero-key", nothing: null, n: 5, s: "text" } },
    settings: { runner: "0xabc", chainId: 1 },
    undef: undefined,
  };

  it("follows keys, indexes (both spellings) and quoted keys", () => {
    expect(resolvePath("fetch.data.items[1].id", vars)).toBe(8);
    expect(resolvePath("fetch.data.items.0.id", vars)).toBe(7);
    expect(resolvePath(`fetch.data['first name']`, vars)).toBe("Ada");
    expect(resolvePath(`fetch.data["first name"]`, vars)).toBe("Ada");
    expect(resolvePath("fetch.data.nothing", vars)).toBeNull();
  });

  it("lets .digits and [digits] select a key of that spelling on objects", () => {
    expect(resolvePath("fetch.data.0", vars)).toBe("zero-key");
    expect(resolvePath("fetch.data[0]", vars)).toBe("zero-key");
  });

  it("fails TEMPLATE_UNRESOLVED naming the path: unknown root, missing key, index out of range, through null or a primitive", () => {
    for (const path of [
      "nope.x",
      "fetch.data.missing",
      "fetch.data.items[2]",
      "fetch.data.items.5.id",
      "fetch.data.nothing.x",
      "fetch.data.n.x",
      "fetch.data.s.length",
      "fetch.data.items.length",
      "undef",
      "fetch.constructor",
      "fetch.__proto__",
    ]) {
      const error = unresolved(() => resolvePath(path, vars));
      expect(error.code).toBe("TEMPLATE_UNRESOLVED");
      expect(error.message).toBe(`unresolved template variable: ${path}`);
      expect(error.path).toBe(path);
    }
  });

  it("never renders undefined", () => {
    expect(unresolved(() => renderString("x={{undef}}", vars)).message).toBe("unresolved template variable: undef");
  });
});

describe("rendering", () => {
  it("renders strings as is, numbers in shortest decimal form, booleans, null and compact JSON", () => {
    expect(renderValue("a b")).toBe("a b");
    expect(renderValue(1.5)).toBe("1.5");
    expect(renderValue(100)).toBe("100");
    expect(renderValue(-0)).toBe("0");
    expect(renderValue(1e21)).toBe("1000000000000000000000");
    expect(renderValue(1.25e22)).toBe("12500000000000000000000");
    expect(renderValue(1e-7)).toBe("0.0000001");
    expect(renderValue(true)).toBe("true");
    expect(renderValue(false)).toBe("false");
    expect(renderValue(null)).toBe("null");
    expect(renderValue({ a: [1, "x"], b: { c: null } })).toBe('{"a":[1,"x"],"b":{"c":null}}');
  });

  it("substitutes every path in a string and reports the paths it resolved", () => {
    const seen: string[] = [];
    const out = renderString(
      "to {{ t.data.to }} amount {{t.data.amount}} ok={{t.data.ok}} {{t.data.list}}",
      { t: { data: { to: "0xdef", amount: 12, ok: true, list: [1, 2] } } },
      { onResolved: (p) => seen.push(p) },
    );
    expect(out).toBe("to 0xdef amount 12 ok=true [1,2]");
    expect(seen).toEqual(["t.data.to", "t.data.amount", "t.data.ok", "t.data.list"]);
  });

  it("leaves {{ … }} that is not a path untouched (customCode source and expressions may be JavaScript)", () => {
    expect(renderString("return {{ a.b }} + ({{ x => x }})", { a: { b: 2 } })).toBe("return 2 + ({{ x => x }})");
  });

  it("renders every string value of a config recursively, never keys, never contractAbi", () => {
    const config = {
      url: "https://api/{{t.data.id}}",
      headers: { "{{t.data.id}}": "Bearer {{secrets.KEY}}" },
      methodCalls: [{ methodParams: ["{{t.data.id}}", "2"] }],
      contractAbi: [{ name: "{{t.data.id}}" }],
      n: 3,
      flag: false,
    };
    const rendered = renderConfig(config, { t: { data: { id: 42 } }, secrets: { KEY: "s3cret" } });
    expect(rendered).toEqual({
      url: "https://api/42",
      headers: { "{{t.data.id}}": "Bearer s3cret" },
      methodCalls: [{ methodParams: ["42", "2"] }],
      contractAbi: [{ name: "{{t.data.id}}" }],
      n: 3,
      flag: false,
    });
    expect(config.url).toBe("https://api/{{t.data.id}}");
  });

  it("gives filter/loop inputVariable the resolved value itself", () => {
    const items = [1, 2, 3];
    expect(resolveWhole("{{ fetch.data.items }}", { fetch: { data: { items } } })).toBe(items);
    expect(resolveWhole("fetch.data.items", { fetch: { data: { items } } })).toBe(items);
    expect(unresolved(() => resolveWhole("{{fetch.data.nope}}", { fetch: { data: {} } })).path).toBe("fetch.data.nope");
  });
});

describe("what a config refers to", () => {
  it("lists distinct paths and roots, skipping contractAbi", () => {
    const config = {
      url: "{{fetch.data.url}}?k={{secrets.API_KEY}}",
      body: "{{fetch.data.url}} {{ a + b }}",
      contractAbi: [{ name: "{{hidden.x}}" }],
      more: ["{{apContext.configVars.TOKEN}}", "{{secrets['OTHER']}}", "{{settings.runner}}"],
    };
    const paths = referencedPaths(config);
    expect(paths.map((p) => p.text)).toEqual([
      "fetch.data.url",
      "secrets.API_KEY",
      "apContext.configVars.TOKEN",
      "secrets['OTHER']",
      "settings.runner",
    ]);
    expect(referencedRoots(paths)).toEqual(["fetch", "secrets", "apContext", "settings"]);
    expect(referencedSecretNames(paths)).toEqual(["API_KEY", "TOKEN", "OTHER"]);
  });
});

describe("reserved words", () => {
  it("are the JavaScript reserved words and literals plus the service roots", () => {
    for (const word of ["break", "await", "yield", "undefined", "NaN", "Infinity", "eval", "arguments", "globalThis", "console"]) {
      expect(isReservedWord(word), word).toBe(true);
    }
    for (const root of ["secrets", "apContext", "context", "date", "settings", "value", "index"]) expect(isReservedWord(root)).toBe(true);
    expect(RESERVED_WORDS).toHaveLength(46 + 7 + 7);
    expect(isReservedWord("fetch")).toBe(false);
    expect(isReservedWord("Value")).toBe(false);
  });
});
