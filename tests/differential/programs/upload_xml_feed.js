// Upload an XML document; the reply is application/xml, so it stays a string.
const items = [{ id: "a1", title: "Tea & biscuits" }, { id: "b2", title: "<b>bold</b>" }];
const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<feed>${items
  .map((i) => `<item id="${i.id}"><title>${esc(i.title)}</title></item>`)
  .join("")}</feed>`;
const stored = await shop.postFeed(xml);
console.log(typeof stored, stored.length);
console.log(stored);
const titles = [...stored.matchAll(/<title>(.*?)<\/title>/g)].map((m) => m[1]);
console.log(JSON.stringify(titles));
const full = await shop.$response.postFeed("<feed/>");
console.log(full.status, full.headers["content-type"], full.body);
