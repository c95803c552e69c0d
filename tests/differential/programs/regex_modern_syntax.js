const it = await shop.getItem("rx");
const results = {};
for (const [name, src, flags, input] of [
  ["set subtraction (v flag)", "[\\p{L}--[a-h]]+", "v", it.name],
  ["duplicate named groups", "(?<w>item)|(?<w>thing)", "", it.name],
  ["inline modifiers", "(?i:ITEM) rx", "", it.name],
]) {
  try { results[name] = new RegExp(src, flags).exec(input)[0]; } catch (e) { results[name] = e.name; }
}
console.log(JSON.stringify(results));
