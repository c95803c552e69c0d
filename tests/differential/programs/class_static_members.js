class Client {
  static calls = 0;
  static async item(id) { Client.calls++; return shop.getItem(id); }
}
await Client.item("s1");
await Client.item("s2");
console.log(Client.calls);
