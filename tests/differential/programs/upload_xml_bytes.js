// An XML body given as UTF-8 bytes rather than a string arrives the same.
const text = "<note lang=\"fr\">déjà vu ✓</note>";
const bytes = [];
for (const ch of text) {
  const c = ch.codePointAt(0);
  if (c < 0x80) bytes.push(c);
  else if (c < 0x800) bytes.push(0xc0 | (c >> 6), 0x80 | (c & 63));
  else bytes.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
}
const a = await shop.postFeed(text);
const b = await shop.postFeed(new Uint8Array(bytes));
console.log(a === b, a);
