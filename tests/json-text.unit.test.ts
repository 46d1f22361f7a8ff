/**
 * JSON held as text (shared/json-text.ts, API.md §18.2): the scanner agrees with JSON.parse on what is
 * JSON, compacts without changing the value, measures nesting without a stack; paths and elements are read
 * out of the text exactly as they would be out of the parsed value; stringify splices texts in.
 */
import { describe, expect, it } from "vitest";
import { arrayLength, checkJson, checkJsonInSlices, elements, JsonText, materialize, member, stringify } from "../shared/json-text";
import { resolvePath } from "../shared/templates";

const parses = (text: string) => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

describe("checkJson", () => {
  const samples = [
    '{"a": [1, 2, {"b": "x\\"y\\u00e9\\n"}], "c": null, "d": -0.5e-3, "e": true, "f": false}',
    "[]",
    "{}",
    " 1.5E+3 ",
    '"s"',
    "0",
    "-0",
    "[[], {}]",
    '{"": 1, "__proto__": {"x": 1}}',
    "[1,]",
    '{"a":1,}',
    "01",
    "1.",
    ".5",
    "+1",
    '{"a" 1}',
    "[1 2]",
    '"\\u00zz"',
    '"\\x"',
    "nul",
    "",
    " ",
    "[",
    "]",
    '"a\nb"',
    "[1]x",
    '{"a":}',
    "NaN",
    "1e",
    "[-]",
  ];
  it("accepts exactly what JSON.parse accepts, and compacts without changing the value", () => {
    for (const text of samples) {
      const checked = checkJson(text);
      expect(checked.ok, text).toBe(parses(text));
      if (checked.ok) expect(JSON.parse(checked.json.text)).toEqual(JSON.parse(text));
    }
  });

  it("agrees with JSON.parse on random texts built from JSON's own tokens", () => {
    const tokens = ["{", "}", "[", "]", ",", ":", '"k"', "1", "-2.5e3", "true", "null", " ", "\n", '"\\u0041"'];
    for (let i = 0; i < 3_000; i++) {
      let text = "";
      for (let n = 1 + Math.floor(Math.random() * 12); n > 0; n--) text += tokens[Math.floor(Math.random() * tokens.length)];
      const checked = checkJson(text);
      expect(checked.ok, text).toBe(parses(text));
      if (checked.ok) expect(JSON.parse(checked.json.text)).toEqual(JSON.parse(text));
    }
  });

  it("measures nesting of any depth without a stack, and in slices that yield", async () => {
    const deep = "[".repeat(200_000) + "]".repeat(200_000);
    expect(checkJson(deep)).toMatchObject({ ok: true, depth: 200_000 });
    expect(await checkJsonInSlices(deep)).toMatchObject({ ok: true, depth: 200_000 });
    expect(checkJson('{"a": [[1]]}')).toMatchObject({ ok: true, depth: 3 });
  });
});

describe("reading a JsonText", () => {
  const value = { a: [1, { b: "x,y]}" }, [2, 3]], 'k"ey': { "": null }, "0": "zero", dup: 1 };
  const text = new JsonText(JSON.stringify(value).replace('"dup":1', '"dup":1,"dup":2'));

  it("reads members and elements as JSON.parse would (the last of repeated keys wins)", () => {
    expect(member(text, { kind: "key", key: "a" })!.text).toBe(JSON.stringify(value.a));
    expect(member(text, { kind: "key", key: 'k"ey' })!.text).toBe('{"":null}');
    expect(member(text, { kind: "index", key: "0", index: 0 })!.text).toBe('"zero"');
    expect(member(text, { kind: "key", key: "dup" })!.text).toBe("2");
    expect(member(text, { kind: "key", key: "missing" })).toBeUndefined();
    const a = member(text, { kind: "key", key: "a" })!;
    expect(elements(a).map((e) => e.text)).toEqual(value.a.map((e) => JSON.stringify(e)));
    expect(arrayLength(a)).toBe(3);
    expect(elements(new JsonText("[]"))).toEqual([]);
    expect(elements(new JsonText("[1,2,3,4]"), 1)).toHaveLength(2);
  });

  it("resolves template paths through it: scalars parsed, containers kept as text", () => {
    const variables = { node: new JsonText(JSON.stringify({ data: value })) };
    expect(resolvePath("node.data.a[1].b", variables)).toBe("x,y]}");
    expect(resolvePath("node.data.a.2", variables)).toEqual(new JsonText("[2,3]"));
    expect(() => resolvePath("node.data.a.3", variables)).toThrow();
    expect(() => resolvePath("node.data.a.b", variables)).toThrow();
  });

  it("splices texts into JSON, and materializes them back into plain values", () => {
    const mixed = { status: 200, data: text, list: [new JsonText("[1]"), 2n], gone: undefined };
    expect(JSON.parse(stringify(mixed))).toEqual({ status: 200, data: JSON.parse(text.text), list: [[1], "2"] });
    expect(materialize({ data: text })).toEqual({ data: JSON.parse(text.text) });
  });
});
