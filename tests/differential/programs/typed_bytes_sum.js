const note = await shop.getNote("tb");
const utf8 = unescape(encodeURIComponent(note));
const bytes = Uint8Array.from(utf8, (c) => c.charCodeAt(0));
console.log(bytes.length, bytes.reduce((s, b) => s + b, 0));
