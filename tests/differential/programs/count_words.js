const note = await shop.getNote("words words");
const freq = {};
for (const w of note.toLowerCase().match(/[a-z]+/g)) freq[w] = (freq[w] || 0) + 1;
console.log(JSON.stringify(Object.entries(freq).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))));
