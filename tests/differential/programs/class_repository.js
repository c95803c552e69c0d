class Repo {
  cache = new Map();
  hits = 0;
  async get(id) {
    if (this.cache.has(id)) { this.hits++; return this.cache.get(id); }
    const it = await shop.getItem(id);
    this.cache.set(id, it);
    return it;
  }
}
const repo = new Repo();
for (const id of ["a", "b", "a", "a", "c"]) await repo.get(id);
console.log(repo.cache.size, repo.hits);
