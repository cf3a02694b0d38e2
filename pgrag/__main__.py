from pgrag.cli import main

main()
