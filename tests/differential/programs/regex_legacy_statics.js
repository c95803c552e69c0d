const note = await shop.getNote("legacy-7");
/note (\S+)/.test(note);
console.log(typeof RegExp.$1, RegExp.$1);
