const it = await shop.getItem("ru");
const view = { ...it, tags: undefined };
console.log(JSON.stringify(view).length > 10, "tags" in view, JSON.stringify(view.tags));
