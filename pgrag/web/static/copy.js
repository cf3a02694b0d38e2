// "Copy as SQL": puts the text of the element a button names on the clipboard, or, where
// the page may not write to it, selects the text and says so.
"use strict";
(function () {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async function () {
      const source = document.getElementById(button.dataset.copy);
      const text = source ? source.textContent : "";
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = button.dataset.done;
      } catch (err) {
        // no clipboard (not a secure context, or no permission): select it for the user
        const range = document.createRange();
        range.selectNodeContents(source);
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(range);
        button.textContent = button.dataset.selected;
      }
    });
  }
})();
